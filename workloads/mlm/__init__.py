"""`mlm`: a BERT encoder trained with masked-language modelling (Hugging Face transformers, from a config),
written on the public door alone (`orch.workload`'s function adapter): `workload.py` (parameters and the
optional extra's check, torch-free), `data.py` (BertForMaskedLM, the Markov-chain or on-disk sequences and
BERT's masking, in ranks only). docs/workloads.md says how to run BERT-large."""
