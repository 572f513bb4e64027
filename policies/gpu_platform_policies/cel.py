"""CEL as the Kubernetes API server evaluates it, with cel-python (pinned 0.5.0).

The admission rules (``admission_rules.json``) are CEL expressions the API server evaluates in
each tenant's ValidatingAdmissionPolicy; the pack evaluates the very same text here. cel-python
implements the CEL language but not Kubernetes' CEL libraries, so the few functions the rules use
are provided here, following k8s.io/apiserver ``pkg/cel/library``:

* ``isQuantity(string)``, ``quantity(string)``, ``<Quantity>.isInteger()``,
  ``<Quantity>.asInteger()`` (quantity.go; ``asInteger`` is an error for a value that is not
  whole or overflows int64);
* equality and ``in`` as cel-go implements them: values of different types are unequal, numbers
  compare by value, ``x == null`` holds only for null (cel-python 0.5 raises "no such overload"
  instead). Same semantics as ``tests/support/crd_schemas.py``, which the pack cannot import.

Kubernetes stores quantities in canonical form (``20000`` is read back as ``20k``, ``2048Mi`` as
``2Gi``, ``1.5`` as ``1500m``: apimachinery ``pkg/api/resource/quantity.go`` ``CanonicalizeBytes``),
so an admission policy only ever sees that form; :func:`canonical_quantity` produces it for the
pack's view of a pod.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

_QUANTITY: Final = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>[0-9]+(\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_SUFFIX: Final = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_INT64: Final = (-(1 << 63), (1 << 63) - 1)


@dataclass(frozen=True)
class Quantity:
    """A parsed Kubernetes quantity: its exact value and how it was written."""

    value: Fraction
    format: str  # "BinarySI", "DecimalSI" or "DecimalExponent"


def parse(text: str) -> Quantity:
    """A Kubernetes quantity string; ValueError when it is not one."""
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    value = Fraction(match["number"])
    if match["sign"] == "-":
        value = -value
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return Quantity(value * (1 << _BINARY[suffix]), "BinarySI")
    if suffix in _DECIMAL:
        return Quantity(value * Fraction(10) ** _DECIMAL[suffix], "DecimalSI")
    return Quantity(value * Fraction(10) ** int(suffix[1:]), "DecimalExponent")


def canonical_quantity(text: str) -> str:
    """The form the API server stores (and an admission policy reads): the largest suffix that
    keeps the mantissa whole, binary for binary quantities that stay whole at 1024 steps."""
    quantity = parse(text)
    value = quantity.value
    sign = "-" if value < 0 else ""
    value = abs(value)
    if value == 0:
        return "0"
    if quantity.format == "BinarySI" and value.denominator == 1 and value >= 1024:
        number, step = value.numerator, 0
        while number % 1024 == 0 and step < 6:
            number //= 1024
            step += 1
        if step:
            suffix = next(s for s, e in _BINARY.items() if e == 10 * step)
            return f"{sign}{number}{suffix}"
    # Decimal (and binary values that are not whole multiples of 1024): exponent a multiple of 3.
    exponent = -9
    while exponent < 18 and (value / Fraction(10) ** (exponent + 3)).denominator == 1:
        exponent += 3
    mantissa = value / Fraction(10) ** exponent
    if mantissa.denominator != 1:  # finer than nano: Kubernetes rounds up
        mantissa = Fraction(-(-mantissa.numerator // mantissa.denominator))
    if quantity.format == "DecimalExponent":
        return f"{sign}{mantissa.numerator}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{mantissa.numerator}{_DECIMAL_SUFFIX[exponent]}"


# ------------------------------------------------------------------------- library functions


def _is_quantity(value: Any) -> Any:
    from celpy import celtypes

    try:
        parse(str(value))
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _quantity(value: Any) -> Any:
    from celpy.evaluation import CELEvalError

    try:
        return parse(str(value))
    except ValueError as error:
        return CELEvalError(str(error), ValueError, None)


def _is_integer(quantity: Any) -> Any:
    from celpy import celtypes

    return celtypes.BoolType(isinstance(quantity, Quantity) and quantity.value.denominator == 1)


def _as_integer(quantity: Any) -> Any:
    from celpy import celtypes
    from celpy.evaluation import CELEvalError

    if not isinstance(quantity, Quantity) or quantity.value.denominator != 1:
        return CELEvalError("cannot convert value to integer", ValueError, None)
    number = quantity.value.numerator
    if not _INT64[0] <= number <= _INT64[1]:
        return CELEvalError("cannot convert value to integer: overflow", OverflowError, None)
    return celtypes.IntType(number)


def _equal(left: Any, right: Any) -> Any:
    from celpy import celtypes

    numeric = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)
    if isinstance(left, numeric) and isinstance(right, numeric):
        return celtypes.BoolType(float(left) == float(right))
    if left is None or right is None:
        return celtypes.BoolType(left is None and right is None)
    if isinstance(left, str) and isinstance(right, str):
        # cel-python 0.5.0 returns a plain str from string concatenation ('a' + b), a
        # StringType elsewhere; in cel-go both are one type, string.
        return celtypes.BoolType(str(left) == str(right))
    if type(left) is not type(right):
        return celtypes.BoolType(False)
    return celtypes.BoolType(left == right)


def _not_equal(left: Any, right: Any) -> Any:
    from celpy import celtypes

    return celtypes.BoolType(not _equal(left, right))


def _in(item: Any, container: Any) -> Any:
    from celpy import celtypes

    if isinstance(container, dict):
        return celtypes.BoolType(any(bool(_equal(item, key)) for key in container))
    return celtypes.BoolType(any(bool(_equal(item, element)) for element in container))


QUANTITY_FUNCTIONS: Final[Mapping[str, Any]] = {
    "isQuantity": _is_quantity,
    "quantity": _quantity,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
}
FUNCTIONS: Final[Mapping[str, Any]] = {
    **QUANTITY_FUNCTIONS,
    "_==_": _equal,
    "_!=_": _not_equal,
    "_in_": _in,
}


class EvaluationError(Exception):
    """An expression that does not evaluate (the API server then applies failurePolicy)."""


def compile_expression(text: str, functions: Mapping[str, Any] | None = None) -> Any:
    """A cel-python program for ``text``; EvaluationError when it does not parse."""
    import celpy
    from celpy.celparser import CELParseError

    env = celpy.Environment()
    try:
        return env.program(env.compile(text), functions=dict(functions or FUNCTIONS))
    except CELParseError as error:
        raise EvaluationError(f"does not parse: {error}") from error


def evaluate(program: Any, activation: Mapping[str, Any]) -> Any:
    """Run a compiled program; EvaluationError for an evaluation error."""
    from celpy.evaluation import CELEvalError

    try:
        result = program.evaluate(dict(activation))
    except CELEvalError as error:
        raise EvaluationError(str(error.args[0]) if error.args else str(error)) from error
    if isinstance(result, CELEvalError):
        raise EvaluationError(str(result.args[0]) if result.args else str(result))
    return result


def to_cel(value: Any) -> Any:
    """JSON-like data as CEL values (None stays null)."""
    from celpy.adapter import json_to_cel

    return json_to_cel(value)


def cel_map(values: Mapping[str, Any]) -> Any:
    """A map of already-evaluated CEL values (the ``variables`` of a policy)."""
    from celpy import celtypes

    return celtypes.MapType({celtypes.StringType(k): v for k, v in values.items()})
