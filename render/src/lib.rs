//! What the weekly mail and the admin pages both show, so that neither takes the other's code:
//! what a user is told of their jobs (`user`: their figures against every user's, what the
//! figures mean, recommendations, their traced jobs' analyses; made from the rollups of crate
//! `mpistat-figures`) and the HTML pieces both lay out the same way (`html`). The mail
//! (`crate::mail`) and the pages (`crate::site_report`, `crate::serve`) use it; it uses neither.

pub mod html;
pub mod user;
