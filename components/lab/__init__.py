"""What only the lab needs: kube-proxy for node containers, HAMi's mock device plugin and the
Docker host's node options. Prod never imports these builders (the policy pack forbids their
objects there)."""
