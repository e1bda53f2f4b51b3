// @generated placeholder
