fn main() -> std::process::ExitCode {
    mailseal::cli::main()
}
