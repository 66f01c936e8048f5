"""Packages whose names are imported when first used, so that importing one (as the command line
does for its choices, and for --help) does not wait for torch.

A package's ``__init__`` names each public name's module (its type checker still reads the
imports under ``TYPE_CHECKING``). Where a name is also a submodule's (``attribution.rollout``),
the name wins, as it does after an eager ``from .rollout import rollout``."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any


class LazyPackage(ModuleType):
    """A package whose exported names load from their submodules on first use, then stay."""

    _homes: dict[str, str]

    def __getattr__(self, name: str) -> Any:
        homes = self.__dict__.get("_homes", {})
        if name not in homes:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{homes[name]}", self.__name__), name)
        super().__setattr__(name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and name in self.__dict__.get("_homes", {}):
            return  # the import system naming a submodule whose name is exported: the export keeps it
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted({*self._homes, *self.__dict__})


def exports(package: str, homes: dict[str, tuple[str, ...]]) -> None:
    """Make ``package`` lazy: ``homes`` maps each submodule to the names it exports."""
    module = sys.modules[package]
    module.__class__ = LazyPackage
    module.__dict__["_homes"] = {name: home for home, names in homes.items() for name in names}
