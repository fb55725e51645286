"""Byzantine-robust aggregators (``median``, ``trimmed-mean``, ``krum``, ``multi-krum``, ``norm-bound``,
``fltrust``): ``rules`` holds the combination rules as array functions, ``aggregators`` the
aggregators of a defense stack, ``fltrust`` the one that uses server-side data, ``compose`` how a
rule combines with a noise or secure aggregator."""
