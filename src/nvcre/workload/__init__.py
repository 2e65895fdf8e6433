"""Workload adapters: how a Job's workload (today a Kubeflow TrainJob) is built and read."""
