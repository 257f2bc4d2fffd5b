"""The trained model whole, whatever shards it: a mixin of :class:`.loop.TrainingLoop`.

FSDP2 spreads a model's parameters over the processes and DeepSpeed ZeRO partitions the optimizer state (its
weights are views into one flat buffer); evaluation, generation and saving need the plain model. The methods here
give it, on the main process's CPU, from the loop's ``model``, ``model_class``, ``accelerator``, ``sharded`` and
``deepspeed``.
"""

from __future__ import annotations

import torch
from accelerate import Accelerator

from .checkpointing import gather_full_state


class ShardedModelAccess:
    """Whole-model views of a possibly sharded training model (see the module docstring)."""

    @property
    def eval_accelerator(self) -> Accelerator | None:
        """The accelerator whose processes split the held-out data among them (see :func:`process_share`), or None
        when every process must evaluate all of it: a sharded model gathers its layers in every forward, so every
        process has to run the same forwards."""
        return None if self.sharded else self.accelerator

    def unsharded_model(self, weights: dict[str, torch.Tensor] | None = None) -> torch.nn.Module:
        """A plain model of the trained model's class and config on the CPU, holding ``weights`` (a whole state
        dict, such as :func:`gather_full_state` gives) or, without them, a fresh initialisation."""
        config = self.accelerator.unwrap_model(self.model).config
        with torch.device("cpu"):
            model = self.model_class(config)
        if weights is not None:
            model.load_state_dict(weights, strict=True)
        return model

    def gathered_model(self) -> torch.nn.Module | None:
        """The trained model, unsharded: a plain copy on the main process's CPU (None on the others; every
        process must call this); the model itself when it is not sharded."""
        model = self.accelerator.unwrap_model(self.model)
        if not self.sharded and not self.deepspeed:
            return model
        weights = self.deepspeed_weights() if self.deepspeed else gather_full_state(model)[0]
        if not self.accelerator.is_main_process:
            return None
        copy = self.unsharded_model(weights)
        if model.can_generate():
            copy.generation_config = model.generation_config
        return copy.train(model.training)

    def deepspeed_weights(self) -> dict[str, torch.Tensor]:
        """The weights of the model DeepSpeed trains, copied out: ZeRO keeps every parameter as a view into
        one flat buffer, which safetensors and ``save_pretrained`` take for weights shared between names."""
        return {name: tensor.detach().clone() for name, tensor in
                self.accelerator.unwrap_model(self.model).state_dict().items()}


__all__ = ["ShardedModelAccess"]
