"""The I/O shells around the pure layers: threads, timers, sockets and files live here and nowhere below."""
