from fltr_audit.cli import main

main()
