"""What a finished run leaves: the Hub-ready model folder, the results files and the attention picture; a mixin of
:class:`.loop.TrainingLoop` (it reads the loop's ``args``, ``accelerator``, ``tokenizer``, ``state`` and task
hooks)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import torch

from .cards import configure_generation, engine_card_arguments, write_run_model_card
from .plotting import plot_attention
from .run_files import save_metrics, write_trainer_state

SELF_ATTENTION_PLOT = "self_attention.png"


class FinishedRun:
    """The final save of a training run (see the module docstring)."""

    def save_final_model(self, results: dict[str, Any], training_data: str | None = None, **card_kwargs) -> None:
        """``save_pretrained`` of the model and tokenizer, generation defaults and the model card."""
        card_kwargs.setdefault("eval_dataset", self.eval_dataset)
        accelerator = self.accelerator
        accelerator.wait_for_everyone()
        model = self.gathered_model()
        if accelerator.is_main_process:
            if model.can_generate():
                configure_generation(model, self.tokenizer, self.args.generation_max_length)
            if self.tokenizer is not None:  # first: the model's save checks it (hf_seqmodels.saved_folders)
                self.tokenizer.save_pretrained(self.args.output_dir)
            model.save_pretrained(self.args.output_dir)  # with the pipelines that run it, as every save
            hyper = {**engine_card_arguments(self.args, accelerator.num_processes), **self.card_arguments()}
            caption = self.plot_self_attention(model)
            if caption:
                card_kwargs["images"] = {caption: SELF_ATTENTION_PLOT, **card_kwargs.get("images", {})}
            write_run_model_card(self.args.output_dir, model, self.tokenizer, results, hyper, training_data,
                                 **card_kwargs)
        accelerator.wait_for_everyone()

    def evaluate_only(self) -> dict[str, float]:
        """``--do_eval`` without ``--do_train``: the metrics of the model as it is, saved as ``eval_results.json``."""
        results = self.evaluate()
        if self.accelerator.is_main_process:
            save_metrics(self.args.output_dir, "eval", results)
        return results

    def write_results(self, results: dict[str, Any]) -> None:
        """``train_results.json``, ``eval_results.json``, ``all_results.json`` and ``trainer_state.json``."""
        output_dir = self.args.output_dir
        save_metrics(output_dir, "train", {k: v for k, v in results.items() if not k.startswith("eval_")})
        evaluation = {k: v for k, v in results.items() if k.startswith("eval_")}
        if evaluation:
            save_metrics(output_dir, "eval", evaluation)
        write_trainer_state(output_dir, global_step=self.state.global_step, epoch=self._epoch_progress(),
                            max_steps=self.total_steps, num_train_epochs=self.args.num_train_epochs,
                            history=self.state.history, logging_steps=self.logging_steps, eval_steps=self.eval_steps,
                            save_steps=self.save_steps, train_batch_size=self.args.per_device_train_batch_size,
                            best_metric=self.state.best_metric, best_global_step=self.state.best_global_step,
                            best_model_checkpoint=self.state.best_model_checkpoint)

    @torch.no_grad()
    def plot_self_attention(self, model) -> str | None:
        """``self_attention.png``: the last layer's self-attention (heads averaged) over :meth:`attention_sample`,
        for models that return attention weights; returns the picture's caption, or None when there is none."""
        sample = self.attention_sample() if self.args.plot else None
        if sample is None or "output_attentions" not in inspect.signature(model.forward).parameters:
            return None
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        out = model(**{k: v.to(device) for k, v in sample.items()}, output_attentions=True, return_dict=True)
        model.train(was_training)
        attentions = getattr(out, "attentions", None)
        if not attentions:
            return None
        weights = attentions[-1][0].float().mean(dim=0).cpu()  # (query, key)
        tokens = self.tokenizer.convert_ids_to_tokens(sample["input_ids"][0].tolist())
        plot_attention(weights.tolist(), tokens, tokens, Path(self.args.output_dir) / SELF_ATTENTION_PLOT,
                       title=f"Self-attention, last layer ({len(attentions)}), heads averaged: held-out example",
                       xlabel="key (attended to)", ylabel="query")
        return "Self-attention of the last layer on a held-out example (rows: queries, columns: keys)"


__all__ = ["FinishedRun", "SELF_ATTENTION_PLOT"]
