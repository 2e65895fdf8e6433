"""``nvcrectl setup``: nvcre's Helm chart, the vendored Kubeflow Trainer chart, and the pure plan
of what setup installs, checks and removes (:mod:`nvcre.setup.plan`)."""
