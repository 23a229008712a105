"""Analyses built on whole simulations: calibration against measurements of real machines."""
