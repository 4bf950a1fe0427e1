//! `mailseal edge-cloud verify-receipt`: checks an execution receipt against the
//! contract, the request's requirements and the result, as a client must before it
//! acts on the result (the edge-cloud contract, sections 4 to 6). The rules are the
//! library's ([`crate::ext::edge_cloud::verify_receipt`]); this only reads files.

use std::path::PathBuf;

use clap::Subcommand;

use super::{read_input, CliResult, ExitCode, Failure};
use crate::ext::edge_cloud::{
    verify_receipt, CapabilityContract, ExecutionReceipt, ExecutionRequirements,
};

#[derive(Subcommand)]
pub(super) enum EdgeCloudCommand {
    /// Check a receipt: exit 0 when it holds for the contract, the request's
    /// requirements and the result; exit 6 and the reason when it does not; exit 3
    /// when a file is not what it should be.
    VerifyReceipt {
        /// The callee's capability contract (JSON), as evaluated.
        #[arg(long, value_name = "FILE")]
        contract: PathBuf,
        /// The request's ExecutionRequirements (JSON).
        #[arg(long, value_name = "FILE")]
        requirements: PathBuf,
        /// The ExecutionReceipt (JSON).
        #[arg(long, value_name = "FILE")]
        receipt: PathBuf,
        /// The result, exactly as the verification method digests it.
        #[arg(long, value_name = "FILE")]
        result: PathBuf,
    },
}

pub(super) fn edge_cloud(cmd: EdgeCloudCommand) -> CliResult {
    match cmd {
        EdgeCloudCommand::VerifyReceipt {
            contract,
            requirements,
            receipt,
            result,
        } => {
            let malformed = |what: &str, e: &dyn std::fmt::Display| {
                Failure::new(ExitCode::Malformed, format!("{what}: {e}"))
            };
            let contract = CapabilityContract::from_json(&read_input(Some(&contract))?)
                .map_err(|e| malformed("--contract", &e))?;
            let requirements = ExecutionRequirements::from_json(&read_input(Some(&requirements))?)
                .map_err(|e| malformed("--requirements", &e))?;
            let receipt = ExecutionReceipt::from_json(&read_input(Some(&receipt))?)
                .map_err(|e| malformed("--receipt", &e))?;
            let result = read_input(Some(&result))?;
            verify_receipt(&receipt, &contract, &requirements, &result).map_err(|e| {
                Failure::new(
                    ExitCode::RefusedByPolicy,
                    format!("edge-cloud: receipt refused: {e}"),
                )
            })?;
            eprintln!(
                "mailseal: the receipt holds for the contract, the requirements and the result"
            );
            Ok(())
        }
    }
}
