"""What only the lab needs: the kind docker network and its MetalLB pool, the host preflight,
kube-proxy for node containers, HAMi's mock device plugin, the mock allocation completer and the
Docker host's node options. Prod registers none of their objects (the policy pack forbids them
there)."""
