"""Settings every test shares."""

from hypothesis import settings

# Hypothesis fails an example that runs longer than its deadline (200 ms by default): a timed
# assertion, which a loaded machine trips. Tests check behaviour; time is measured in benchmarks/.
settings.register_profile("nvcre", deadline=None)
settings.load_profile("nvcre")
