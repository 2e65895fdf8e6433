"""What the BandwidthMeasurement kind (:mod:`nvcre.controllers.measurement.bandwidth`) keeps
beside it: its gauges."""
