"""Two grandchildren with one name and one type under parents of one type but different
grandparent types: the mock's URNs (parent's last type only) would be equal, the engine's (the
whole qualified type chain) are not, so the harness must accept this program."""

import pulumi


class Part(pulumi.ComponentResource):
    def __init__(self, kind: str, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"test:index:{kind}", name, None, opts)
        self.register_outputs({})


left = Part("Left", "root-left")
right = Part("Right", "root-right")
middle_left = Part("Middle", "middle-left", pulumi.ResourceOptions(parent=left))
middle_right = Part("Middle", "middle-right", pulumi.ResourceOptions(parent=right))
Part("Leaf", "leaf", pulumi.ResourceOptions(parent=middle_left))
Part("Leaf", "leaf", pulumi.ResourceOptions(parent=middle_right))
