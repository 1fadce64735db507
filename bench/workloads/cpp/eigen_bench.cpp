// Dense linear algebra with Eigen's templates on generated matrices: products, LU solve,
// Householder QR least squares, Cholesky, SVD and a symmetric eigensolver, scaled by argv[1]
// (the number of rounds). Prints a checksum of every result.
#include <Eigen/Dense>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

using Eigen::Index;
using Eigen::MatrixXd;
using Eigen::VectorXd;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double next_uniform() {  // xorshift64*, in [-1, 1)
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  uint64_t r = rng_state * 2685821657736338717ull;
  return (double)(r >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}
static MatrixXd random_matrix(Index rows, Index cols) {
  MatrixXd m(rows, cols);
  for (Index j = 0; j < cols; j++)
    for (Index i = 0; i < rows; i++) m(i, j) = next_uniform();
  return m;
}

// Folds a value into a running checksum, rounded so that it reads the same on every run.
static uint64_t sum = 1469598103934665603ull;
static void mix(double v) {
  long long q = std::llround(v * 1e6);
  sum = (sum ^ (uint64_t)q) * 1099511628211ull;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 1;
  const Index n = 120;
  double residual_max = 0;
  for (int r = 0; r < rounds; r++) {
    MatrixXd a = random_matrix(n, n);
    MatrixXd b = random_matrix(n, n);
    VectorXd x = VectorXd::NullaryExpr(n, [](Index) { return next_uniform(); });

    // Products and a partial-pivoting LU solve.
    MatrixXd c = a * b + 0.5 * b.transpose() * a;
    VectorXd rhs = c * x;
    Eigen::PartialPivLU<MatrixXd> lu(c);
    VectorXd xs = lu.solve(rhs);
    residual_max = std::max(residual_max, (xs - x).cwiseAbs().maxCoeff());
    mix(lu.determinant() / std::pow(10.0, std::floor(std::log10(std::abs(lu.determinant())))));
    mix(xs.sum());

    // Full-pivoting LU: rank and inverse.
    Eigen::FullPivLU<MatrixXd> flu(a.topLeftCorner(60, 60));
    mix((double)flu.rank());
    mix(flu.inverse().trace());

    // Least squares with Householder QR on a tall matrix.
    MatrixXd tall = random_matrix(2 * n, n / 2);
    VectorXd y = VectorXd::NullaryExpr(2 * n, [](Index) { return next_uniform(); });
    VectorXd ls = tall.householderQr().solve(y);
    mix(ls.squaredNorm());
    mix((tall * ls - y).norm());
    Eigen::ColPivHouseholderQR<MatrixXd> cqr(tall);
    mix((double)cqr.rank());

    // Cholesky (LLT, LDLT) on a symmetric positive-definite matrix.
    MatrixXd spd = a.transpose() * a + MatrixXd::Identity(n, n) * (double)n;
    Eigen::LLT<MatrixXd> llt(spd);
    mix(llt.solve(x).sum());
    Eigen::LDLT<MatrixXd> ldlt(spd);
    mix(ldlt.vectorD().maxCoeff());

    // Singular values (Jacobi on a small block, divide and conquer on the whole matrix).
    Eigen::JacobiSVD<MatrixXd> jsvd(a.topLeftCorner(40, 40), Eigen::ComputeThinU | Eigen::ComputeThinV);
    mix(jsvd.singularValues()(0));
    mix(jsvd.singularValues()(39));
    Eigen::BDCSVD<MatrixXd> bsvd(b);
    mix(bsvd.singularValues().sum());

    // Symmetric eigenvalues.
    MatrixXd sym = a + a.transpose();
    Eigen::SelfAdjointEigenSolver<MatrixXd> es(sym);
    mix(es.eigenvalues()(0));
    mix(es.eigenvalues()(n - 1));
    mix(es.eigenvalues().cwiseAbs().sum());
  }
  std::printf("eigen: %d rounds of %ldx%ld, max LU residual %s, checksum %016llx\n", rounds,
              (long)n, (long)n, residual_max < 1e-6 ? "small" : "LARGE", (unsigned long long)sum);
  return 0;
}
