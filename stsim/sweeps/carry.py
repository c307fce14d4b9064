"""Extensions that travel with a sweep's function to the workers.

``stsim.register_encoding``, ``stsim.register_optimizer`` and ``stsim.register_arch``
fill tables of the process that calls them. The workers of a process pool (or of a Dask
cluster) import stsim afresh and never run the calling script or notebook, so a name
registered there would be unknown in them. :func:`snapshot` takes the entries the caller
added — everything not registered by ``import stsim`` itself — and every task of
:func:`stsim.sweep` carries it; :meth:`Registrations.install` puts them into the worker's
tables before the row runs. In the calling process (an inline or thread executor) the
entries are the very objects already registered, and nothing changes.

The factories travel as the pool sends the function (cloudpickle): a class defined in a
notebook or script goes by value, one of an importable module by reference (its module
must be importable on the workers, as for ``fn`` itself).
"""
from __future__ import annotations

from stsim.core import families as _families
from stsim.core import optim as _optim
from stsim.core import problem as _problem

__all__ = ["Registrations", "snapshot"]

#: (module, table name) of every registry whose user entries travel
_TABLES = ((_families, "_REGISTERED"), (_optim, "_OPTIMIZERS"),
           (_problem, "_ARCHS"), (_problem, "_OBJECTIVES"))
# what `import stsim` registers: this module is imported at the end of stsim/__init__.py,
# after every built-in registration (the FCN architecture, the population objective)
_BUILTIN = {name: frozenset(getattr(mod, name)) for mod, name in _TABLES}


class Registrations:
    """The caller's own registry entries, ``{table: {name: entry}}`` (picklable as the
    pool pickles: cloudpickle)."""

    def __init__(self, tables: dict):
        self.tables = tables

    def __bool__(self):
        return any(self.tables.values())

    def names(self) -> dict:
        """``{table: [names]}`` of the entries carried."""
        return {t: sorted(e) for t, e in self.tables.items() if e}

    def install(self) -> None:
        """Put the entries into this process's tables (a worker's); an entry already there
        as the same object is left as it is."""
        for mod, name in _TABLES:
            table = getattr(mod, name)
            for key, entry in self.tables.get(name, {}).items():
                if table.get(key) is not entry:
                    table[key] = entry

    def __repr__(self):
        return f"Registrations({self.names()})"


def snapshot() -> Registrations:
    """The entries registered in this process since ``import stsim``."""
    return Registrations({name: {k: v for k, v in getattr(mod, name).items()
                                 if k not in _BUILTIN[name]}
                          for mod, name in _TABLES})
