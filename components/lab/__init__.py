"""What only the lab needs: kube-proxy for node containers, HAMi's mock device plugin and the
Docker host's node options. Prod registers none of their objects (the policy pack forbids them
there); config validation reads the mock's limits."""
