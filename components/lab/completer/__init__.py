"""The lab's mock allocation completer: its script (stdlib only) and its Kubernetes manifests."""
