//! What the weekly mail and the admin pages both show, so that neither takes the other's code:
//! what a user is told of their jobs (`user`: their figures against every user's, what the
//! figures mean, recommendations, their traced jobs' analyses; made from the rollups of crate
//! `mpistat-figures`), the HTML pieces both lay out the same way (`html`), and what their charts
//! share (`plot`: the bundled font, scales). The mail (crate `mpistat-mail`) and the pages
//! (crate `mpistat-pages`) use it; it uses neither.

pub mod html;
pub mod plot;
pub mod user;

/// Why what a user is told could not be made: the rollups it is made from could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Figures(#[from] mpistat_figures::Error),
}
