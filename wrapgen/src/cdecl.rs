//! A parser for the C prototypes of `mpi.h`, and the mapping of their types to the Rust types
//! that bindgen generates for `crate::ffi` in the profiler.
//!
//! Only the subset of C that MPI prototypes use is accepted: a base type with an optional leading
//! `const`, any number of `*`, an optional parameter name and any number of array suffixes
//! (`int ranges[][3]`), plus `void` parameter lists and a trailing `...`.

use std::fmt;

/// Why a prototype could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclError {
    #[error("unexpected character `{0}`")]
    BadCharacter(char),
    #[error("expected `RETURN_TYPE NAME(PARAMETERS)`")]
    NotAPrototype,
    #[error("parameter {index}: {why}")]
    BadParameter { index: usize, why: String },
    #[error("parameter {index} has no name")]
    UnnamedParameter { index: usize },
    #[error("duplicate parameter name `{0}`")]
    DuplicateParameter(String),
    #[error("no Rust type for C type `{0}`")]
    UnsupportedType(String),
}

/// A C type as written in a prototype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CType {
    /// A leading `const`: it qualifies the base type (the innermost pointee).
    pub is_const: bool,
    /// `int`, `void`, `char`, `double` or a typedef such as `MPI_Comm` or `MPI_User_function`.
    pub base: String,
    /// Number of `*`.
    pub pointers: usize,
    /// Array suffixes in order: `[]` is `None`, `[3]` is `Some(3)`.
    pub arrays: Vec<Option<u32>>,
}

/// One named parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub ty: CType,
}

/// A parsed prototype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prototype {
    pub ret: CType,
    pub name: String,
    pub params: Vec<Param>,
    /// Ends with `...` (only `MPI_Pcontrol`).
    pub variadic: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Number(u32),
    Star,
    Comma,
    Ellipsis,
    Open(char),
    Close(char),
}

fn tokenize(text: &str) -> Result<Vec<Token>, DeclError> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut word = String::new();
            while let Some(&c) = chars
                .peek()
                .filter(|c| c.is_ascii_alphanumeric() || **c == '_')
            {
                word.push(c);
                chars.next();
            }
            tokens.push(Token::Ident(word));
        } else if c.is_ascii_digit() {
            let mut n = 0u32;
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                n = n
                    .checked_mul(10)
                    .and_then(|n| n.checked_add(d))
                    .ok_or(DeclError::BadCharacter(c))?;
                chars.next();
            }
            tokens.push(Token::Number(n));
        } else if c == '.' {
            for _ in 0..3 {
                if chars.next() != Some('.') {
                    return Err(DeclError::BadCharacter('.'));
                }
            }
            tokens.push(Token::Ellipsis);
        } else {
            chars.next();
            tokens.push(match c {
                '*' => Token::Star,
                ',' => Token::Comma,
                '(' | '[' => Token::Open(c),
                ')' | ']' => Token::Close(c),
                _ => return Err(DeclError::BadCharacter(c)),
            });
        }
    }
    Ok(tokens)
}

/// Parses `[const] BASE *... [NAME] [N]...`; returns the type and the name if there is one.
fn parse_declaration(tokens: &[Token]) -> Result<(CType, Option<String>), String> {
    let mut rest = tokens;
    let mut is_const = false;
    if let [Token::Ident(w), tail @ ..] = rest {
        if w == "const" {
            is_const = true;
            rest = tail;
        }
    }
    let base = match rest {
        [Token::Ident(w), tail @ ..] if w != "const" => {
            rest = tail;
            w.clone()
        }
        _ => return Err("expected a type name".into()),
    };
    let mut pointers = 0;
    while let [Token::Star, tail @ ..] = rest {
        pointers += 1;
        rest = tail;
    }
    let mut name = None;
    if let [Token::Ident(w), tail @ ..] = rest {
        if w == "const" {
            return Err("`const` after `*` is not supported".into());
        }
        name = Some(w.clone());
        rest = tail;
    }
    let mut arrays = Vec::new();
    loop {
        match rest {
            [Token::Open('['), Token::Close(']'), tail @ ..] => {
                arrays.push(None);
                rest = tail;
            }
            [Token::Open('['), Token::Number(n), Token::Close(']'), tail @ ..] => {
                arrays.push(Some(*n));
                rest = tail;
            }
            [] => break,
            [t, ..] => return Err(format!("unexpected {t:?}")),
        }
    }
    Ok((
        CType {
            is_const,
            base,
            pointers,
            arrays,
        },
        name,
    ))
}

impl Prototype {
    /// Parses one prototype such as `int MPI_Send(const void *buf, int count, ...)` (no `;`).
    pub fn parse(text: &str) -> Result<Prototype, DeclError> {
        let tokens = tokenize(text)?;
        let open = tokens
            .iter()
            .position(|t| *t == Token::Open('('))
            .ok_or(DeclError::NotAPrototype)?;
        if open < 2 || tokens.last() != Some(&Token::Close(')')) {
            return Err(DeclError::NotAPrototype);
        }
        let (ret, name) =
            parse_declaration(&tokens[..open]).map_err(|_| DeclError::NotAPrototype)?;
        let name = name
            .filter(|_| ret.arrays.is_empty())
            .ok_or(DeclError::NotAPrototype)?;
        let inner = &tokens[open + 1..tokens.len() - 1];
        if inner
            .iter()
            .any(|t| matches!(t, Token::Open('(') | Token::Close(')')))
        {
            return Err(DeclError::BadParameter {
                index: 1,
                why: "function pointer declarators are not supported".into(),
            });
        }
        let mut params = Vec::new();
        let mut variadic = false;
        let pieces: Vec<&[Token]> = inner.split(|t| *t == Token::Comma).collect();
        let is_void_list = matches!(inner, [Token::Ident(w)] if w == "void");
        if !is_void_list && !inner.is_empty() {
            for (i, piece) in pieces.iter().enumerate() {
                let index = i + 1;
                if *piece == [Token::Ellipsis] && i == pieces.len() - 1 && i > 0 {
                    variadic = true;
                    continue;
                }
                let (ty, name) = parse_declaration(piece)
                    .map_err(|why| DeclError::BadParameter { index, why })?;
                let name = name.ok_or(DeclError::UnnamedParameter { index })?;
                if params.iter().any(|p: &Param| p.name == name) {
                    return Err(DeclError::DuplicateParameter(name));
                }
                params.push(Param { name, ty });
            }
        }
        let proto = Prototype {
            ret,
            name,
            params,
            variadic,
        };
        proto.ret.rust_type()?;
        for p in &proto.params {
            p.ty.rust_type()?;
        }
        Ok(proto)
    }

    pub fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }
}

impl fmt::Display for CType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_const {
            write!(f, "const ")?;
        }
        write!(f, "{}", self.base)?;
        if self.pointers > 0 {
            write!(f, " {}", "*".repeat(self.pointers))?;
        }
        for dim in &self.arrays {
            match dim {
                Some(n) => write!(f, "[{n}]")?,
                None => write!(f, "[]")?,
            }
        }
        Ok(())
    }
}

impl CType {
    /// A typedef of a function type (`typedef int (MPI_User_function)(...)`), used as `X *f` (or
    /// `X f`, the same in a parameter);
    /// bindgen makes the pointer an `Option<unsafe extern "C" fn ...>` named after the typedef.
    pub fn is_function_typedef(&self) -> bool {
        // (`_c`: the large-count callbacks of MPI 4, e.g. `MPI_User_function_c`.)
        let base = self.base.strip_suffix("_c").unwrap_or(&self.base);
        self.base.starts_with("MPI_") && (base.ends_with("_function") || base.ends_with("_fn"))
    }

    /// A plain `int` (no pointer, no array).
    pub fn is_int(&self) -> bool {
        self.base == "int" && self.pointers == 0 && self.arrays.is_empty()
    }

    /// A value of typedef `base` (no pointer, no array).
    pub fn is_value_of(&self, base: &str) -> bool {
        self.base == base && self.pointers == 0 && self.arrays.is_empty()
    }

    /// Pointer (or array parameter) levels.
    pub fn indirections(&self) -> usize {
        self.pointers + usize::from(!self.arrays.is_empty())
    }

    /// The Rust spelling of this type as bindgen declares it, e.g. `*const c_void`, `MPI_Comm`,
    /// `*mut [c_int; 3]`, `MPI_User_function` (for `MPI_User_function *`).
    pub fn rust_type(&self) -> Result<String, DeclError> {
        let unsupported = || DeclError::UnsupportedType(self.to_string());
        if self.is_function_typedef() {
            // A parameter of function type (MPICH's `MPI_T_event_cb_function event_cb_function`)
            // is a pointer to it, as in C.
            return if self.pointers <= 1 && self.arrays.is_empty() {
                Ok(self.base.clone())
            } else {
                Err(unsupported())
            };
        }
        let mut inner = match self.base.as_str() {
            "void" => "c_void",
            "int" => "c_int",
            "char" => "c_char",
            "double" => "f64",
            // Open MPI's mpi.h makes MPI_Fint a macro for int, so bindgen knows no such type.
            "MPI_Fint" => "c_int",
            b if b.starts_with("MPI_") => b,
            _ => return Err(unsupported()),
        }
        .to_string();
        if inner == "c_void" && self.indirections() == 0 {
            return Err(unsupported());
        }
        for dim in self.arrays.iter().skip(1).rev() {
            let n = dim.ok_or_else(unsupported)?;
            inner = format!("[{inner}; {n}]");
        }
        let levels = self.indirections();
        if levels == 0 {
            return Ok(inner);
        }
        let mut ty = format!("*{} {inner}", if self.is_const { "const" } else { "mut" });
        for _ in 1..levels {
            ty = format!("*mut {ty}");
        }
        Ok(ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rust(decl: &str) -> String {
        let p = Prototype::parse(&format!("int MPI_X({decl})")).unwrap();
        p.params[0].ty.rust_type().unwrap()
    }

    #[test]
    fn maps_the_mpi_subset_like_bindgen() {
        assert_eq!(rust("const void *buf"), "*const c_void");
        assert_eq!(rust("void *buf"), "*mut c_void");
        assert_eq!(rust("int count"), "c_int");
        assert_eq!(rust("const int level"), "c_int");
        assert_eq!(rust("int *flag"), "*mut c_int");
        assert_eq!(rust("int coords[]"), "*mut c_int");
        assert_eq!(rust("const int dims[]"), "*const c_int");
        assert_eq!(rust("int ranges[][3]"), "*mut [c_int; 3]");
        assert_eq!(rust("char *name"), "*mut c_char");
        assert_eq!(rust("const char datarep[]"), "*const c_char");
        assert_eq!(rust("char **argv"), "*mut *mut c_char");
        assert_eq!(rust("char ***argv"), "*mut *mut *mut c_char");
        assert_eq!(rust("char *array_of_argv[]"), "*mut *mut c_char");
        assert_eq!(rust("char **array_of_argv[]"), "*mut *mut *mut c_char");
        assert_eq!(rust("MPI_Comm comm"), "MPI_Comm");
        assert_eq!(rust("const MPI_Info array_of_info[]"), "*const MPI_Info");
        assert_eq!(rust("MPI_Aint disp"), "MPI_Aint");
        assert_eq!(rust("MPI_Offset *offset"), "*mut MPI_Offset");
        assert_eq!(rust("MPI_Count count"), "MPI_Count");
        assert_eq!(rust("MPI_Fint f"), "c_int");
        assert_eq!(rust("MPI_User_function *function"), "MPI_User_function");
    }

    #[test]
    fn parses_whole_prototypes() {
        let p = Prototype::parse("double MPI_Wtime(void)").unwrap();
        assert_eq!(
            (p.name.as_str(), p.params.len(), p.ret.rust_type().unwrap()),
            ("MPI_Wtime", 0, "f64".into())
        );
        let p = Prototype::parse("int MPI_Pcontrol(const int level, ...)").unwrap();
        assert!(p.variadic);
        assert_eq!(p.params.len(), 1);
        let p =
            Prototype::parse("int MPI_Recv(void * buf, int count, MPI_Status *status)").unwrap();
        assert_eq!(p.params[0].name, "buf");
        assert_eq!(p.params[2].ty.to_string(), "MPI_Status *");
    }

    #[test]
    fn rejects_what_it_does_not_understand() {
        assert!(matches!(
            Prototype::parse("int MPI_X(int)"),
            Err(DeclError::UnnamedParameter { index: 1 })
        ));
        assert!(matches!(
            Prototype::parse("int MPI_X(long x)"),
            Err(DeclError::UnsupportedType(_))
        ));
        assert!(matches!(
            Prototype::parse("int MPI_X(int a, int a)"),
            Err(DeclError::DuplicateParameter(_))
        ));
        assert!(matches!(
            Prototype::parse("MPI_X(int a)"),
            Err(DeclError::NotAPrototype)
        ));
        assert!(matches!(
            Prototype::parse("int MPI_X(int a;"),
            Err(DeclError::BadCharacter(';'))
        ));
        assert!(matches!(
            Prototype::parse("int MPI_X(int (*f)(int))"),
            Err(DeclError::BadParameter { .. })
        ));
        assert!(matches!(
            Prototype::parse("int MPI_X(char * const p)"),
            Err(DeclError::BadParameter { .. })
        ));
        assert!(matches!(
            Prototype::parse("int MPI_X(int a[][])"),
            Err(DeclError::UnsupportedType(_))
        ));
    }
}
