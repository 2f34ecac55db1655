"""The host-side primitives every SSH user shares, beneath ``detect/`` and ``capture/``. Pure: text in, data out.

    argv.py        values that go into a remote argv, checked (pids, ports, paths, argv)
    properties.py  the one Java .properties parser (server.properties, zoo.cfg)
    procfs.py      /proc readings (process state, the host's clock)
    sockets.py     the socket tables of a host (ss / netstat) and the one endpoint filter
    jmxtool.py     Kafka's JmxTool: its argv per version and its output
"""
