"""The operator's reads of a live cluster: progress, connections and routes (:mod:`.reads`), and the snapshot
collector (:mod:`.snapshot`). They use ``runtime``'s transports; ``runtime`` never imports them."""
