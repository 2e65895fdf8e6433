"""Kubeflow Trainer (trainer.kubeflow.org/v1alpha1) shapes that nvcre generates."""
