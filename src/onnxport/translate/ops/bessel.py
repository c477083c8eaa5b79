"""Bessel and Airy functions as torch computes them: the Cephes rational and Chebyshev
approximations of ATen's Math.h, with its branch points, in the dtype torch computes in."""

from __future__ import annotations

import math

import onnx_ir as ir

from onnxport.translate.ops._helpers import cast, expected_dtype
from onnxport.translate.registry import translates

# Coefficients copied from aten/src/ATen/native/Math.h (highest power first; the Chebyshev
# series as Cephes' chbevl takes them). j0/y0 and j1/y1 share their asymptotic P and Q.
_J0_PP = [
    7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
    5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
    9.99999999999999997821e-01,
]
_J0_PQ = [
    9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
    5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
    1.00000000000000000218e+00,
]
_J0_QP = [
    -1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
    -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
    -5.14105326766599330220e+01, -6.05014350600728481186e+00,
]
_J0_QQ = [
    6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
    7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
    2.42005740240291393179e+02,
]
_J0_RP = [
    -4.79443220978201773821e+09, 1.95617491946556577543e+12, -2.49248344360967716204e+14,
    9.70862251047306323952e+15,
]
_J0_RQ = [
    4.99563147152651017219e+02, 1.73785401676374683123e+05, 4.84409658339962045305e+07,
    1.11855537045356834862e+10, 2.11277520115489217587e+12, 3.10518229857422583814e+14,
    3.18121955943204943306e+16, 1.71086294081043136091e+18,
]
_J1_PP = [
    7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
    5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
    1.00000000000000000254e+00,
]
_J1_PQ = [
    5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
    5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
    9.99999999999999997461e-01,
]
_J1_QP = [
    5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
    3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
    2.11688757100572135698e+02, 2.52070205858023719784e+01,
]
_J1_QQ = [
    7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
    9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
    3.36093607810698293419e+02,
]
_J1_RP = [
    -8.99971225705559398224e+08, 4.52228297998194034323e+11, -7.27494245221818276015e+13,
    3.68295732863852883286e+15,
]
_J1_RQ = [
    6.20836478118054335476e+02, 2.56987256757748830383e+05, 8.35146791431949253037e+07,
    2.21511595479792499675e+10, 4.74914122079991414898e+12, 7.84369607876235854894e+14,
    8.95222336184627338078e+16, 5.32278620332680085395e+18,
]
_Y0_YP = [
    1.55924367855235737965e+04, -1.46639295903971606143e+07, 5.43526477051876500413e+09,
    -9.82136065717911466409e+11, 8.75906394395366999549e+13, -3.46628303384729719441e+15,
    4.42733268572569800351e+16, -1.84950800436986690637e+16,
]
_Y0_YQ = [
    1.04128353664259848412e+03, 6.26107330137134956842e+05, 2.68919633393814121987e+08,
    8.64002487103935000337e+10, 2.02979612750105546709e+13, 3.17157752842975028269e+15,
    2.50596256172653059228e+17,
]
_Y1_YP = [
    1.26320474790178026440e+09, -6.47355876379160291031e+11, 1.14509511541823727583e+14,
    -8.12770255501325109621e+15, 2.02439475713594898196e+17, -7.78877196265950026825e+17,
]
_Y1_YQ = [
    5.94301592346128195359e+02, 2.35564092943068577943e+05, 7.34811944459721705660e+07,
    1.87601316108706159478e+10, 3.88231277496238566008e+12, 6.20557727146953693363e+14,
    6.87141087355300489866e+16, 3.97270608116560655612e+18,
]
_I0_A = [
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-09,
    -1.30002500998624804212e-08, 6.04699502254191894932e-08, -2.67079385394061173391e-07,
    1.11738753912010371815e-06, -4.41673835845875056359e-06, 1.64484480707288970893e-05,
    -5.75419501008210370398e-05, 1.88502885095841655729e-04, -5.76375574538582365885e-04,
    1.63947561694133579842e-03, -4.32430999505057594430e-03, 1.05464603945949983183e-02,
    -2.37374148058994688156e-02, 4.93052842396707084878e-02, -9.49010970480476444210e-02,
    1.71620901522208775349e-01, -3.04682672343198398683e-01, 6.76795274409476084995e-01,
]
_I1_A = [
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
    3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-09,
    9.38153738649577178388e-09, -4.44505912879632808065e-08, 2.00329475355213526229e-07,
    -8.56872026469545474066e-07, 3.47025130813767847674e-06, -1.32731636560394358279e-05,
    4.78156510755005422638e-05, -1.61760815825896745588e-04, 5.12285956168575772895e-04,
    -1.51357245063125314899e-03, 4.15642294431288815669e-03, -1.05640848946261981558e-02,
    2.47264490306265168283e-02, -5.29459812080949914269e-02, 1.02643658689847095384e-01,
    -1.76416518357834055153e-01, 2.52587186443633654823e-01,
]
_K0_A = [
    1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
    1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
    1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
    -5.35327393233902768720e-01,
]
_K0_B = [
    5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17,
    -1.67823109680541210385e-16, 5.51205597852431940784e-16, -1.84859337734377901440e-15,
    6.34007647740507060557e-15, -2.22751332699166985548e-14, 8.03289077536357521100e-14,
    -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
    1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10,
    -1.69753450938905987466e-09, 8.57403401741422608519e-09, -4.66048989768794782956e-08,
    2.76681363944501510342e-07, -1.83175552271911948767e-06, 1.39498137188764993662e-05,
    -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
    2.44030308206595545468e+00,
]
_K1_A = [
    -7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
    -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
    -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
    -3.53155960776544875667e-01, 1.52530022733894777053e+00,
]
_K1_B = [
    -5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17,
    1.83809354436663880070e-16, -6.05704724837331885336e-16, 2.03870316562433424052e-15,
    -7.01983709041831346144e-15, 2.47715442448130437068e-14, -8.97670518232499435011e-14,
    3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
    -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10,
    2.01504975519703286596e-09, -1.03457624656780970260e-08, 5.74108412545004946722e-08,
    -3.50196060308781257119e-07, 2.40648494783721712015e-06, -1.93619797416608296024e-05,
    1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
    2.72062619048444266945e+00,
]
_AIRY_AN = [
    3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
    1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
    1.40264691163389668864e+01, 9.99999999999999995305e-01,
]
_AIRY_AD = [
    5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
    1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
    1.40959135607834029598e+01, 1.00000000000000000470e+00,
]
_AIRY_AFN = [
    -1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
    -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
    -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08,
]
_AIRY_AFD = [
    1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
    9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
    4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07,
]
_AIRY_AGN = [
    1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
    9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
    5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
    8.11789239554389293311e-08, 3.41551784765923618484e-10,
]
_AIRY_AGD = [
    9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
    5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
    4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
    4.91834570062930015649e-09,
]


class _Float:
    """Arithmetic in one float dtype on the builder (torch evaluates these functions in the
    input's float dtype: float32 for float32, int64 and bool inputs)."""

    def __init__(self, g, dtype: ir.DataType):
        self.g, self.dtype = g, dtype

    def c(self, value: float) -> ir.Value:
        return self.g.const(float(value), self.dtype)

    def __getattr__(self, op_type: str):
        # f.Add(a, 2.0): python numbers become constants of the dtype.
        def apply(*inputs, **attributes):
            inputs = [self.c(v) if isinstance(v, (int, float)) else v for v in inputs]
            return self.g.op(op_type, *inputs, **attributes)
        return apply

    def polynomial(self, coefficients, w) -> ir.Value:
        """Horner's rule, as Math.h's loops (``p = p * w + C[i]``, from p = 0)."""
        p = self.c(coefficients[0])
        for coefficient in coefficients[1:]:
            p = self.Add(self.Mul(p, w), coefficient)
        return p

    def chebyshev(self, coefficients, y) -> ir.Value:
        """Cephes' chbevl recurrence, as Math.h unrolls it: 0.5 (b0 - b2)."""
        b0, b1, b2 = self.c(coefficients[0]), self.c(0.0), None
        for coefficient in coefficients[1:]:
            b2, b1 = b1, b0
            b0 = self.Add(self.Sub(self.Mul(y, b1), b2), coefficient)
        return self.Mul(0.5, self.Sub(b0, b2))

    def where(self, condition, then, otherwise) -> ir.Value:
        if isinstance(then, (int, float)):
            then = self.c(then)
        if isinstance(otherwise, (int, float)):
            otherwise = self.c(otherwise)
        return self.g.op("Where", condition, then, otherwise)


def _compute_dtype(g) -> ir.DataType:
    out = expected_dtype(g)
    return ir.DataType.DOUBLE if out == ir.DataType.DOUBLE else ir.DataType.FLOAT


def _unary(*names: str):
    """Register ``function(f, x)`` for ``names``: x cast to the dtype torch computes in, the
    result cast to the dtype torch returns."""
    def register(function):
        def translation(g, self):
            dtype = _compute_dtype(g)
            out = expected_dtype(g) or dtype
            return cast(g, function(_Float(g, dtype), cast(g, self, dtype)), out)

        translation.__name__ = function.__name__
        translation.__doc__ = f"{names[0].split('::')[1]}(Tensor self) -> Tensor"
        translates(*names)(translation)
        return function
    return register


_QUARTER_PI, _THREE_QUARTER_PI = math.pi / 4, 3 * math.pi / 4
_SQRT_2_OVER_PI, _TWO_OVER_PI = math.sqrt(2 / math.pi), 2 / math.pi


def _hankel(f, x, p, q, phase, sine_first: bool, square_of_ratio: bool):
    """The asymptotic form beyond 5 shared by j0, j1, y0, y1 (x >= 0):
    (P(w)/P'(w) cos(x - phase) -+ 5/x Q(w)/Q'(w) sin(x - phase)) sqrt(2/pi) / sqrt(x)."""
    pp, pq, qp, qq = p + q
    # j1/y1 write w as (5/x)(5/x), j0/y0 as 25/(x x); kept so that float32 rounds alike.
    w = (f.Mul(f.Div(5.0, x), f.Div(5.0, x)) if square_of_ratio
         else f.Div(25.0, f.Mul(x, x)))
    angle = f.Sub(x, phase)
    first, second = (f.Sin(angle), f.Cos(angle)) if sine_first else (f.Cos(angle), f.Sin(angle))
    main = f.Mul(f.Div(f.polynomial(pp, w), f.polynomial(pq, w)), first)
    correction = f.Mul(f.Mul(f.Div(5.0, x), f.Div(f.polynomial(qp, w), f.polynomial(qq, w))),
                       second)
    combined = f.Add(main, correction) if sine_first else f.Sub(main, correction)
    return f.Div(f.Mul(combined, _SQRT_2_OVER_PI), f.Sqrt(x))


def _j0(f, x):
    a = f.Abs(x)
    x2 = f.Mul(a, a)
    small = f.Div(f.Mul(f.Mul(f.Sub(x2, 5.78318596294678452118), f.Sub(x2, 30.4712623436620863991)),
                        f.polynomial(_J0_RP, x2)), f.polynomial(_J0_RQ, x2))
    small = f.where(f.Less(a, 1e-5), f.Sub(1.0, f.Div(x2, 4.0)), small)
    large = _hankel(f, a, (_J0_PP, _J0_PQ), (_J0_QP, _J0_QQ), _QUARTER_PI, False, False)
    return f.where(f.LessOrEqual(a, 5.0), small, large)


def _j1_nonnegative(f, a):
    x2 = f.Mul(a, a)
    small = f.Mul(f.Mul(f.Mul(f.Div(f.polynomial(_J1_RP, x2), f.polynomial(_J1_RQ, x2)), a),
                        f.Sub(x2, 14.6819706421238932572)), f.Sub(x2, 49.2184563216946036703))
    large = _hankel(f, a, (_J1_PP, _J1_PQ), (_J1_QP, _J1_QQ), _THREE_QUARTER_PI, False, True)
    return f.where(f.LessOrEqual(a, 5.0), small, large)


@_unary("aten::special_bessel_j0", "prims::bessel_j0")
def bessel_j0(f, x):
    return _j0(f, x)


@_unary("aten::special_bessel_j1", "prims::bessel_j1")
def bessel_j1(f, x):
    # j1 is odd: torch returns -j1(-x) below zero.
    result = _j1_nonnegative(f, f.Abs(x))
    return f.where(f.Less(x, 0.0), f.Neg(result), result)


def _y_small_edges(f, x, result):
    """y0/y1 at and below zero: -inf at 0, NaN below."""
    result = f.where(f.Less(x, 0.0), math.nan, result)
    return f.where(f.Equal(x, 0.0), -math.inf, result)


@_unary("aten::special_bessel_y0", "prims::bessel_y0")
def bessel_y0(f, x):
    x2 = f.Mul(x, x)
    small = f.Add(f.Div(f.polynomial(_Y0_YP, x2), f.polynomial(_Y0_YQ, x2)),
                  f.Mul(f.Mul(_TWO_OVER_PI, f.Log(x)), _j0(f, x)))
    large = _hankel(f, x, (_J0_PP, _J0_PQ), (_J0_QP, _J0_QQ), _QUARTER_PI, True, False)
    return f.where(f.LessOrEqual(x, 5.0), _y_small_edges(f, x, small), large)


@_unary("aten::special_bessel_y1", "prims::bessel_y1")
def bessel_y1(f, x):
    x2 = f.Mul(x, x)
    j1 = _j1_nonnegative(f, f.Abs(x))
    small = f.Add(f.Mul(x, f.Div(f.polynomial(_Y1_YP, x2), f.polynomial(_Y1_YQ, x2))),
                  f.Mul(_TWO_OVER_PI, f.Sub(f.Mul(j1, f.Log(x)), f.Div(1.0, x))))
    large = _hankel(f, x, (_J1_PP, _J1_PQ), (_J1_QP, _J1_QQ), _THREE_QUARTER_PI, True, True)
    return f.where(f.LessOrEqual(x, 5.0), _y_small_edges(f, x, small), large)


def _modified_k(f, x, order: int, scaled: bool):
    """K0 or K1 (times exp(x) when ``scaled``): a Chebyshev series in x^2 - 2 with I0/I1's up to
    2, one in 8/x - 2 beyond; inf at 0, NaN below."""
    small_terms, large_terms = (_K0_A, _K0_B) if order == 0 else (_K1_A, _K1_B)
    series = f.chebyshev(small_terms, f.Sub(f.Mul(x, x), 2.0))
    # modified_bessel_i0/i1_forward's series for |x| <= 8, in (x/2) - 2.
    i_terms = _I0_A if order == 0 else _I1_A
    i_series = f.chebyshev(i_terms, f.Sub(f.Div(x, 2.0), 2.0))
    log_half = f.Log(f.Mul(0.5, x))
    if order == 0:
        i0 = f.Mul(f.Exp(x), i_series)
        small = f.Sub(series, f.Mul(log_half, i0))
    else:
        i1 = f.Mul(f.Mul(i_series, x), f.Exp(x))
        small = f.Add(f.Mul(log_half, i1), f.Div(series, x))
    large = f.chebyshev(large_terms, f.Sub(f.Div(8.0, x), 2.0))
    if scaled:
        small = f.Mul(small, f.Exp(x))
    else:
        large = f.Mul(f.Exp(f.Neg(x)), large)
    large = f.Div(large, f.Sqrt(x))
    result = f.where(f.LessOrEqual(x, 2.0), small, large)
    result = f.where(f.Less(x, 0.0), math.nan, result)
    return f.where(f.Equal(x, 0.0), math.inf, result)


@_unary("aten::special_modified_bessel_k0", "prims::modified_bessel_k0")
def modified_bessel_k0(f, x):
    return _modified_k(f, x, 0, False)


@_unary("aten::special_modified_bessel_k1", "prims::modified_bessel_k1")
def modified_bessel_k1(f, x):
    return _modified_k(f, x, 1, False)


@_unary("aten::special_scaled_modified_bessel_k0", "prims::scaled_modified_bessel_k0")
def scaled_modified_bessel_k0(f, x):
    return _modified_k(f, x, 0, True)


@_unary("aten::special_scaled_modified_bessel_k1", "prims::scaled_modified_bessel_k1")
def scaled_modified_bessel_k1(f, x):
    return _modified_k(f, x, 1, True)


_SPHERICAL_J0_SERIES = [1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0,
                        1.0 / 120.0, -1.0 / 6.0, 1.0]


@_unary("aten::special_spherical_bessel_j0", "prims::spherical_bessel_j0")
def spherical_bessel_j0(f, x):
    # sin(x)/x, by its Taylor series below 0.5; 0 at +-inf.
    series = f.polynomial(_SPHERICAL_J0_SERIES, f.Mul(x, x))
    result = f.where(f.Less(f.Abs(x), 0.5), series, f.Div(f.Sin(x), x))
    return f.where(f.IsInf(x), 0.0, result)


# Math.h sums the series until a term is below epsilon: 8 steps in float32, about 13 in double.
_AIRY_SERIES_STEPS = 20


@_unary("aten::special_airy_ai")
def airy_ai(f, x):
    dtype_epsilon = 2.0 ** -52 if f.dtype == ir.DataType.DOUBLE else 2.0 ** -23
    # Below -2.09: the oscillating asymptotic form.
    zeta_negative = f.Div(f.Mul(f.Mul(-2.0, x), f.Sqrt(f.Neg(x))), 3.0)
    z = f.Div(1.0, zeta_negative)
    z2 = f.Mul(z, z)
    afn_afd = f.Div(f.polynomial(_AIRY_AFN, z2), f.polynomial(_AIRY_AFD, z2))
    agn_agd = f.Div(f.polynomial(_AIRY_AGN, z2), f.polynomial(_AIRY_AGD, z2))
    t = f.Add(zeta_negative, 0.25 * math.pi)
    negative = f.Mul(f.Div(0.564189583547756286948, f.Sqrt(f.Sqrt(f.Neg(x)))),
                     f.Sub(f.Mul(f.Sin(t), f.Add(1.0, f.Mul(z2, afn_afd))),
                           f.Mul(f.Cos(t), f.Mul(z, agn_agd))))
    # From 2.09 on: the decaying asymptotic form.
    zeta = f.Div(f.Mul(f.Mul(2.0, x), f.Sqrt(x)), 3.0)
    inverse = f.Div(1.0, zeta)
    ratio = f.Div(f.polynomial(_AIRY_AN, inverse), f.polynomial(_AIRY_AD, inverse))
    positive = f.Div(f.Mul(0.564189583547756286948, ratio),
                     f.Mul(f.Mul(2.0, f.Sqrt(f.Sqrt(x))), f.Exp(zeta)))
    # In between: the Maclaurin series, summed until a term of f falls below epsilon.
    series_f, series_g = f.c(1.0), x
    m, n, k = f.c(1.0), x, 1.0
    cube = f.Mul(f.Mul(x, x), x)
    running = None
    for _ in range(_AIRY_SERIES_STEPS):
        m = f.Div(f.Mul(m, cube), k + 1.0)
        n = f.Div(f.Mul(n, cube), k + 2.0)
        m = f.Div(m, k + 2.0)
        next_f = f.Add(series_f, m)
        n = f.Div(n, k + 3.0)
        next_g = f.Add(series_g, n)
        k += 3.0
        if running is None:
            series_f, series_g = next_f, next_g
        else:
            series_f = f.where(running, next_f, series_f)
            series_g = f.where(running, next_g, series_g)
        still = f.Greater(f.Abs(f.Div(m, series_f)), dtype_epsilon)
        running = still if running is None else f.And(running, still)
    middle = f.Sub(f.Mul(0.355028053887817239260, series_f),
                   f.Mul(0.258819403792806798405, series_g))
    result = f.where(f.Less(x, -2.09), negative,
                     f.where(f.GreaterOrEqual(x, 2.09), positive, middle))
    result = f.where(f.Greater(x, 103.892), 0.0, result)
    return f.where(f.IsInf(x), math.nan, result)
