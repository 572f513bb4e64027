"""What only prod needs: an existing management cluster, the Cluster API operator and its
providers, Cluster API machines (Metal3 by default) and the NVIDIA GPU Operator. The lab
registers none of their objects."""
