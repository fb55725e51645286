"""Privacy vocabulary shared by the engine's consumers: the mechanisms a defense declares
(``mechanisms``) and the claim trials that test them (``claim_trials``)."""
