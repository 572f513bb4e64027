"""A program that registers one URN twice (two children of one component type with one name,
under two different parents): the engine refuses the second; the harness must too."""

import pulumi


class Part(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("test:index:Part", name, None, opts)
        self.register_outputs({})


first = Part("team")
second = Part("team-a")
# URNs hold the parent's type, not its name: both children are ...Part$test:index:Part::team-a-l4.
Part("team-a-l4", pulumi.ResourceOptions(parent=first))
Part("team-a-l4", pulumi.ResourceOptions(parent=second))
