"""The registry's alias and wrapping hook: what op files use instead of its private table."""

from __future__ import annotations

from onnxport.translate.registry import Registry, default_registry


def _registry() -> Registry:
    registry = Registry()
    registry.register("aten::neg", lambda g, x: ("old", x), since_opset=1)
    registry.register("aten::neg", lambda g, x: ("new", x), since_opset=13)
    return registry


def test_alias_registers_every_opset_of_the_target():
    registry = _registry()
    registry.alias("aten::neg", "prims::neg")
    assert registry.lookup("prims::neg", 11).function(None, 1) == ("old", 1)
    assert registry.lookup("prims::neg", 18).function(None, 1) == ("new", 1)


def test_wrap_replaces_each_translation_at_its_opset():
    registry = _registry()

    def doubled(translation):
        return lambda g, x: translation(g, 2 * x)

    assert registry.wrap("aten::neg", doubled)
    assert registry.lookup("aten::neg", 11).function(None, 1) == ("old", 2)
    assert registry.lookup("aten::neg", 18).function(None, 1) == ("new", 2)
    assert not registry.wrap("aten::nothing", doubled)
    assert not registry.is_registered("aten::nothing")


def test_library_uses_them():
    registry = default_registry()
    assert registry.lookup("prims::sqrt", 18).function is registry.lookup("aten::sqrt", 18).function
    # The complex layout's wrappers keep the real translation's schema docstring.
    assert registry.lookup("aten::mul", 18).function.__doc__.startswith("aten::mul(")
