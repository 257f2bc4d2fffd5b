"""Train a tokenizer and save it with save_pretrained; see `python tokenizer_scripts/train_tokenizer.py -h`."""

from hf_seqmodels.tokenization.cli import main

if __name__ == "__main__":
    main()
