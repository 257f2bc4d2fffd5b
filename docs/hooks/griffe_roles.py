"""A griffe extension for the API reference: the docstrings' reST roles (``:class:`X```, ``:func:`~m.f```) read
as code (```X```, ```m.f```), as they would in Sphinx, instead of showing their markup."""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|obj|exc|const):`~?([^`]+)`")


class ReSTRoles(griffe.Extension):
    """Rewrite the roles of every docstring the reference renders."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(r"`\1`", obj.docstring.value)
