"""How every forward of the package decides what to return, as transformers' built-in models do.

* ``output_hidden_states`` / ``output_attentions``: the forward keyword wins; when it is None the config's
  value (``config.output_hidden_states``, set in the config or through
  ``from_pretrained(path, output_hidden_states=True)``) applies.
* ``return_dict``: every ``forward`` is wrapped in transformers' ``can_return_tuple``, which reads the keyword,
  else ``config.return_dict``, and turns the output into a tuple only at the outermost call. A head calls
  its base model through :func:`structured`, so it always gets a ``ModelOutput`` back, whatever the user
  asked for.

This module is copied next to the model code by ``save_pretrained`` (remote code).
"""

from __future__ import annotations

from typing import Any


def output_flags(config: Any, output_hidden_states: bool | None = None,
                 output_attentions: bool | None = None) -> tuple[bool, bool]:
    """``(output_hidden_states, output_attentions)``: each keyword when given, else the config's value."""
    if output_hidden_states is None:
        output_hidden_states = bool(getattr(config, "output_hidden_states", False))
    if output_attentions is None:
        output_attentions = bool(getattr(config, "output_attentions", False))
    return bool(output_hidden_states), bool(output_attentions)


def structured(module: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``module`` (a base model, an encoder, a decoder) so that it returns its ``ModelOutput``, never a
    tuple: the tuple form is for the caller of the outermost model only."""
    kwargs["return_dict"] = True
    return module(*args, **kwargs)


__all__ = ["output_flags", "structured"]
