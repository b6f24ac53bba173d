"""``hf:FOLDER``: a frozen Hugging Face text tower (BERT, RoBERTa, PubMedBERT, ...) as FedBM's language model.

FedBM's Table XII swaps the language model behind LKCC for BERT and RoBERTa; the
authors' code loads them with transformers (``BertModel``, ``RobertaModel``) and takes
the mean of ``last_hidden_state`` over the tokens as a sentence's embedding. Here any
``AutoModel`` folder loads the same way (hub switched off; a hub id such as
``bert-base-uncased`` works when it is already in the local Hugging Face cache), and the
mean runs over the real tokens only: the code's plain mean also averages the padding
positions, so a sentence's embedding there depends on the longest sentence in its batch
(a departure, for an embedding that does not).

A CLIP-style text tower with a projection (BiomedCLIP's is a PubMedBERT plus a linear
projection, the paper's default) is the ``hf-clip:FOLDER`` form instead, through
:mod:`fedprior.encoders.hf_clip`'s ``get_text_features``.
"""

from __future__ import annotations

import torch

from fedprior.encoders.hf_clip import load_pretrained, resolve_folder
from fedprior.encoders.weights import check_model_folder, fingerprint, folder_files

FOLDER_HELP = "give a folder written by a transformers model's and its tokenizer's save_pretrained (config.json, weights, tokenizer files)"


class HFTextEncoder:
    """A frozen transformers text model: sentences -> the mean of the last hidden states over their tokens."""

    def __init__(self, spec: str, batch_size: int = 64, field: str = "algorithm.text_model") -> None:
        folder = resolve_folder(spec, False, prefix="hf", field=field, help_text=FOLDER_HELP, download_hint="you copy the model there")
        check_model_folder(folder, field, "a text model")
        from transformers import AutoModel

        model, self.tokenizer = load_pretrained(AutoModel, folder, field, "a text model", FOLDER_HELP)
        self.name = f"hf:{spec}"
        self.model = model.float().eval().requires_grad_(False)
        self.dim = int(model.config.hidden_size)
        self.batch_size = batch_size
        self.max_length = min(int(getattr(self.tokenizer, "model_max_length", 512)), 512)
        self.fingerprint = fingerprint("hf-text", "masked-mean", files=folder_files(folder), root=folder)

    @torch.no_grad()
    def encode_texts(self, texts: list[str]) -> torch.Tensor:
        """Texts -> float32 (len(texts), hidden_size): mean of the last hidden states over each text's tokens."""
        out = [torch.zeros(0, self.dim)]
        for start in range(0, len(texts), self.batch_size):
            tokens = self.tokenizer(
                list(texts[start : start + self.batch_size]), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            )
            hidden = self.model(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"]).last_hidden_state
            mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            out.append(((hidden * mask).sum(1) / mask.sum(1).clamp_min(1.0)).float())
        return torch.cat(out)
