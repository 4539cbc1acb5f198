"""Units (ASE, CODATA-2014 default): eV, Å, amu, fs, K (docs/probes.md §1.1)."""

#: Boltzmann constant in eV/K.
KB_EV_PER_K = 8.617330337217213e-5
#: One femtosecond in ASE time units (Å·sqrt(amu/eV)).
FS = 0.09822694788464063
