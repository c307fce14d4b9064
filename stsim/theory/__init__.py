"""The theory: exact population objective (:mod:`~stsim.theory.population`), the closed-form
reduced dynamics (:mod:`~stsim.theory.reduced`) and the theorem checks
(:mod:`~stsim.theory.checks`). Built on :mod:`stsim.core`."""
