"""A hostile registry and receiver on loopback (``server.HostileServer``): an HTTP server that
lies about lengths and digests, drips bytes, streams without end and answers longer than asked —
the peers the OCI, S3 and webhook clients must survive."""
