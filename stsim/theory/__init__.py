"""The theory: exact population objective (:mod:`~stsim.theory.population`), the closed-form
reduced dynamics (:mod:`~stsim.theory.reduced`), other targets' exact side
(:mod:`~stsim.theory.targets`) and the theorem checks
(:mod:`~stsim.theory.checks`, with its parts: :mod:`~stsim.theory.conditions`,
:mod:`~stsim.theory.embedded`, :mod:`~stsim.theory.ood`, :mod:`~stsim.theory.budget`,
:mod:`~stsim.theory.report`). Built on :mod:`stsim.core`."""
