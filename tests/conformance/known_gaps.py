"""Contracts a family or head does not meet yet: ``{(family name or head class name, contract): reason}``.

Applied by :func:`conformance_harness.cases` as ``xfail(strict=True)``: when a fix makes the test pass it
XPASSes, which fails the run until the entry is removed here. The contract names are the first argument of
``cases(...)`` / ``family_cases(...)`` in the test modules.
"""

KNOWN_GAPS: dict[tuple[str, str], str] = {
}
