"""Specs as values: the typed run spec (``run``), campaign spec (``campaign``), its grid
(``grid``) and the defense spelling rules (``defense_spelling``)."""
