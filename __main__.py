from kernelskill.cli import main

main()
