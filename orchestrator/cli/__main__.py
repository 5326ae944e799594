from orchestrator.cli import console_main

console_main()
