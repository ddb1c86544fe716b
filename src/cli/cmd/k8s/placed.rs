//! Where `k8s load`'s and `k8s sweep`'s variants run, and their prices: from `--prices`
//! (the price of each one's node by its instance type, its share of it) and `--cost`.

use std::path::Path;

use crate::cli::PlanError;
use crate::compare::TargetCost;
use crate::k8s::{self, Cluster};
use crate::placement::{Placement, PriceBasis, Prices};

/// The targets' placements and their prices per hour (with how each was reckoned).
pub fn placed_and_priced(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    targets: &[k8s::LoadTarget],
    prices: Option<&Path>,
    cost: &[(String, f64)],
) -> anyhow::Result<(Vec<Placement>, Vec<PriceBasis>)> {
    let placements = runtime.block_on(k8s::placements(cluster, targets))?;
    let charged = match prices {
        None => cost
            .iter()
            .map(|(name, price)| PriceBasis {
                name: name.clone(),
                price_per_hour: *price,
                basis: None,
            })
            .collect(),
        Some(path) => {
            let file = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| PlanError::Invalid(format!("--prices {file}: {e}")))?;
            let list =
                Prices::parse(&text, &file).map_err(|e| PlanError::Invalid(e.to_string()))?;
            list.charge(&file, &placements, cost)
                .map_err(|e| PlanError::Invalid(e.to_string()))?
        }
    };
    Ok((placements, charged))
}

/// The prices as `--cost` pairs, for the comparison's and the sweep's cost figures.
pub fn pairs(charged: &[PriceBasis]) -> Vec<(String, f64)> {
    charged
        .iter()
        .map(|b| (b.name.clone(), b.price_per_hour))
        .collect()
}

/// Each cost line told how its price was reckoned, when a price list gave it.
pub fn with_basis(costs: &mut [TargetCost], charged: &[PriceBasis]) {
    for c in costs {
        c.basis = charged
            .iter()
            .find(|b| b.name == c.name)
            .and_then(|b| b.basis.clone());
    }
}
