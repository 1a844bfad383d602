//! Images and PDFs made ready for vision-capable language models: decoded
//! within bounds, downscaled to what the providers use, re-encoded without
//! metadata ([`image`]); PDFs' pages counted from their page tree
//! ([`pdf`]). Both are synchronous and CPU-bound: callers run them in
//! `spawn_blocking`.

pub mod image;
pub mod pdf;
#[doc(hidden)]
pub mod testdata;
mod turbo;

pub use self::image::{
    ImageDetail, ImageError, ImageLimits, PreparedImage, anthropic_image_tokens,
    openai_image_tokens, prepare_image,
};
pub use self::pdf::{PdfError, pdf_pages};
