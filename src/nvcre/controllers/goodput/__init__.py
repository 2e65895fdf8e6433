"""What the GoodputMeasurement kind (:mod:`nvcre.controllers.measurement.goodput`) keeps beside
it: its gauges and where a pod's next read starts."""
