//! Dataset statistics of a box layer (3EED Table 6, Table 10, Fig. 4, Fig. 13): `boxlayer stats`.
