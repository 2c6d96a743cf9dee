"""The catalog seam ("which notes, with which metadata") and the search index behind it.

``catalog`` is what tools ask; ``indexer`` keeps one catalog per workspace fresh (the
server's own writes, watcher hints, an incremental rescan by ``scan``); ``noteindex`` and
``search`` are the SQLite FTS5 index in the state directory (a cache, never the truth);
``schema`` the rows it holds, ``ranking`` their order, ``linkgraph`` and ``related`` the
link queries over it, ``attachments`` the non-Markdown files it lists.
"""
