"""The remoting codec: frames, headers, bodies, fastjson's JSON and stored messages, without any socket."""
