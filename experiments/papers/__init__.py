"""The papers' experiments, each a chain of the project's commands with
its committed results in experiments/results/: distill_from_minilm,
knowledge_transfer, mixed_vocab_student, lexical_probe, tense_intent,
qat_report, and plateau (a teacher fine-tuned until more steps stop
helping)."""
